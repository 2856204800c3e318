#!/bin/sh
# One parameter combination of the study: greet someone, leave a file behind.
greeting=$1
name=$2
echo "$greeting, $name!" | tee "${greeting}_${name}.txt"
sleep 1
