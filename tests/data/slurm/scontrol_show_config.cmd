scontrol show config | grep -i -E 'MaxArraySize|MinJobAge'
