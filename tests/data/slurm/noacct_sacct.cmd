sacct -X -P --noheader -j 32,33 --format=JobID,State,ExitCode,Start,End,Submit,Reason,JobName
