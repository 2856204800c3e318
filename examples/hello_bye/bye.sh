#!/bin/sh
# Runs only after its combination's hello step completed.
echo "Bye, World! (after: $1)"
