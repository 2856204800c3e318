sacct -X -P --noheader --jobs=32 --format=JobID\,JobIDRaw\,State\,ExitCode\,Start\,End\,Reason
