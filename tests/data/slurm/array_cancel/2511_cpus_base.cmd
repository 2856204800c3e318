sacct -X -P --noheader --jobs=9 --format=JobID\,JobIDRaw\,State\,ExitCode\,Start\,End\,Reason
