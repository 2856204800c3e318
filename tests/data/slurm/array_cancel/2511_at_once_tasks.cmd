sacct -X -P --noheader --jobs=1_0\,1_1 --format=JobID\,JobIDRaw\,State\,ExitCode\,Start\,End\,Reason
