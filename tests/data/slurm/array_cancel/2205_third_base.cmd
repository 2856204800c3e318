sacct -X -P --noheader --jobs=36 --format=JobID\,JobIDRaw\,State\,ExitCode\,Start\,End\,Reason
