sacct -X -P --noheader --jobs=3_0\,3_1\,3_2\,3_3 --format=JobID\,JobIDRaw\,State\,ExitCode\,Start\,End\,Reason
