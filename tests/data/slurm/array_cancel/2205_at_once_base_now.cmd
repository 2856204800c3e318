sacct -X -P --noheader --jobs=31 --format=JobID\,JobIDRaw\,State\,ExitCode\,Start\,End\,Reason
