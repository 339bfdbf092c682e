from delayline.cli import main

main()
