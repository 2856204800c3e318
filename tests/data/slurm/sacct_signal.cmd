sacct -X -P --noheader -j 8 --format=JobID,State,ExitCode,Start,End,Submit,Reason,JobName
