sacct -X -P --noheader --jobs=39 --format=JobID\,JobIDRaw\,State\,ExitCode\,Start\,End\,Reason
