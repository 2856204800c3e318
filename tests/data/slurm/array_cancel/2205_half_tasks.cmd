sacct -X -P --noheader --jobs=33_0\,33_1\,33_2\,33_3 --format=JobID\,JobIDRaw\,State\,ExitCode\,Start\,End\,Reason
