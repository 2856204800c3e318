squeue --noheader --states=all --jobs=6 --format='%i|%T|%r|%S|%e|%V|%j'
