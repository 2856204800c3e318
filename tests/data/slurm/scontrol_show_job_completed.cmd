scontrol show job 7
