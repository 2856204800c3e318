sacct -P --noheader -j 7,8,1 --format=JobID,State,ExitCode,Start,End,Submit,Reason,JobName
