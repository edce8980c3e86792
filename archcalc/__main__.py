from archcalc.cli import main

main()
