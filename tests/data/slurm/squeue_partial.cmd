squeue --noheader --states=all --jobs=6,11 --format='%i|%T|%r|%S|%e|%V|%j'
