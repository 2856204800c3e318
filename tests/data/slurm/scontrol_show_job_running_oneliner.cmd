scontrol -o show job 11
