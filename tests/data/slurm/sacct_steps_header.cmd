sacct -P -j 6 --format=JobID,State,ExitCode,Start,End,Submit,Reason,JobName
