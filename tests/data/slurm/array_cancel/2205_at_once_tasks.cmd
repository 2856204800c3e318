sacct -X -P --noheader --jobs=31_0\,31_1 --format=JobID\,JobIDRaw\,State\,ExitCode\,Start\,End\,Reason
