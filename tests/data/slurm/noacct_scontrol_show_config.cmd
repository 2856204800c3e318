scontrol show config | grep -i -E 'AccountingStorage(Type|Enforce)|JobAcctGatherType|MinJobAge'
