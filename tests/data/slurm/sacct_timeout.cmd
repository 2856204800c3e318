sacct -X -P --noheader -j 1 --format=JobID,State,ExitCode,Start,End,Submit,Reason,JobName
