sacct -X -P --noheader --jobs=33 --format=JobID\,JobIDRaw\,State\,ExitCode\,Start\,End\,Reason
