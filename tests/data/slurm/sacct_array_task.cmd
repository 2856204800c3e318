sacct -X -P --noheader -j 19_2 --format=JobID,State,ExitCode,Start,End,Submit,Reason,JobName
