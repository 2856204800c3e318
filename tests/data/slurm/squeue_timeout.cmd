squeue --noheader --states=all --jobs=1 --format='%i|%T|%r|%S|%e|%V|%j'
