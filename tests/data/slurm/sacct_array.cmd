sacct -X -P --noheader -j 13,14,19 --format=JobID,State,ExitCode,Start,End,Submit,Reason,JobName
