squeue -j 6
