scontrol show job 6
