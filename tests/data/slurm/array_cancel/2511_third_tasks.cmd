sacct -X -P --noheader --jobs=6_0\,6_1\,6_2 --format=JobID\,JobIDRaw\,State\,ExitCode\,Start\,End\,Reason
