scontrol -o show job 13
