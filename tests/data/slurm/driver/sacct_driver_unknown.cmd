sacct -X -P --noheader --jobs=999999 --format=JobID\,JobIDRaw\,State\,ExitCode\,Start\,End\,Reason
