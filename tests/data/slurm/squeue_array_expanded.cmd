squeue --noheader --array --states=all --jobs=13,14 --format='%i|%T|%r|%S|%e|%V|%j'
