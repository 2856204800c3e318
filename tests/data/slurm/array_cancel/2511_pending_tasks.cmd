sacct -X -P --noheader --jobs=2_0\,2_1 --format=JobID\,JobIDRaw\,State\,ExitCode\,Start\,End\,Reason
