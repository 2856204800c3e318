sacct -X -P --noheader --jobs=36_0\,36_1\,36_2 --format=JobID\,JobIDRaw\,State\,ExitCode\,Start\,End\,Reason
