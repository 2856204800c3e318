squeue --noheader --array --states=all --jobs=1609,1609 --Format='JobArrayID:0|,JobID:0|,State:0|,Reason:0|,StartTime:0|,EndTime:0|,exit_code:0|'
