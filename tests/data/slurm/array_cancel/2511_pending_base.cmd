sacct -X -P --noheader --jobs=2 --format=JobID\,JobIDRaw\,State\,ExitCode\,Start\,End\,Reason
