squeue --noheader --array --states=all --jobs=259\,260\,261\,262\,263\,264\,265 --Format=JobArrayID:0\|\,JobID:0\|\,State:0\|\,Reason:0\|\,StartTime:0\|\,EndTime:0\|\,exit_code:0\|
