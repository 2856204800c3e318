squeue --noheader --states=all --jobs=32,33 --format='%i|%T|%r|%S|%e|%V|%j'
