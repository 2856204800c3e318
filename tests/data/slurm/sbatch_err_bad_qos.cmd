sbatch --parsable --qos=nosuchqos --wrap='true'
