scontrol -o show job 32
