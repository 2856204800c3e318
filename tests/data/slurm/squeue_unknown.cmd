squeue --noheader --states=all --jobs=999999 --format='%i|%T|%r|%S|%e|%V|%j'
