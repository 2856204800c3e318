sacct -X -P --noheader -j 9,10,11,12 --format=JobID,State,ExitCode,Start,End,Submit,Reason,JobName
