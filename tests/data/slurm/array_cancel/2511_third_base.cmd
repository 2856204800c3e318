sacct -X -P --noheader --jobs=6 --format=JobID\,JobIDRaw\,State\,ExitCode\,Start\,End\,Reason
