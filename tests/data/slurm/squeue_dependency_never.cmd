squeue --noheader --states=all --jobs=11,12 --format='%i|%T|%r|%S|%e|%V|%j'
