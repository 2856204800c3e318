scontrol show job 11
