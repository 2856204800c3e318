sacct -X -P --noheader -j 999999 --format=JobID,State,ExitCode,Start,End,Submit,Reason,JobName
