sacct -X -P --noheader --jobs=3 --format=JobID\,JobIDRaw\,State\,ExitCode\,Start\,End\,Reason
