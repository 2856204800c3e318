sacct -X -P --noheader --jobs=1 --format=JobID\,JobIDRaw\,State\,ExitCode\,Start\,End\,Reason
