squeue --noheader --states=all --jobs=13_1 --format='%i|%T|%r|%S|%e|%V|%j'
