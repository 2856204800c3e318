squeue --version
