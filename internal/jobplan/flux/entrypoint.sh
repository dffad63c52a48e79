# Runs as the node container's command, after the variables above, with
# the training command as its arguments. Every node runs a Flux broker;
# node 0 runs the command with flux run over all of them, and the TrainJob
# ends with it.
root=/mnt/flux
view=$root/view
config=$root/config
export PATH=$PATH:$view/bin
cp -R "$root"/software/* /opt/software/

# Flux's Python, from the view.
pyroot=$(find "$view" -maxdepth 2 -type d -path "$view/lib/python3*" 2>/dev/null | head -n 1)
if [ -n "$pyroot" ] && [ -f "$view/bin/$(basename "$pyroot")" ]; then
  rm -f "$view/bin/python3" "$view/bin/python"
  ln -s "$view/bin/$(basename "$pyroot")" "$view/lib/python" || true
  ln -s "$view/bin/$(basename "$pyroot")" "$view/lib/python3" || true
fi
export PYTHONPATH=${PYTHONPATH:-}:$pyroot/site-packages
export FLUX_RC_EXTRA=$view/etc/flux/rc1.d

# Helpers for an interactive session: load Fluxion, and the environment.
printf 'flux module remove sched-simple\nflux module load sched-fluxion-resource\nflux module load sched-fluxion-qmanager\n' > "$root/load-fluxion.sh"
cat > "$root/flux-view.sh" <<EOT
#!/bin/bash
export PATH=$PATH
export PYTHONPATH=$PYTHONPATH
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:$view/lib
export fluxsocket=local://$config/run/flux/local
EOT

# The CURVE certificate, readable by its owner only.
cert=$config/etc/curve/curve.cert
cp /curve/curve.cert "$cert"
chmod 600 "$cert"
chown -R "$(id -u)" "$cert"

# The resources of the instance: every host, its cores and GPUs.
flux R encode --hosts="$(cat "$config/etc/flux/system/hostlist")" $FLUX_RESOURCES > "$config/etc/flux/system/R"

export STATE_DIR=$config/var/lib/flux
export FLUX_OUTPUT_DIR=/tmp/fluxout
mkdir -p "$STATE_DIR" "$FLUX_OUTPUT_DIR"
options="-Scron.directory=$config/etc/flux/system/cron.d -Stbon.fanout=256 -Srundir=$config/run/flux -Sstatedir=$STATE_DIR -Slocal-uri=local://$config/run/flux/local -Slog-stderr-level=0 -Slog-stderr-mode=local"
command="$*"

if [ "$(hostname)" = "$FLUX_MAIN_HOST" ]; then
  if [ -z "$command" ]; then
    echo "No command: an interactive Flux instance"
    exec flux broker --config-path "$config/etc/flux/config" $options
  fi
  echo "flux run $FLUX_RUN_FLAGS $command"
  flux start -o --config "$config/etc/flux/config" $options flux run $FLUX_RUN_FLAGS $command
  status=$?
else
  # A follower: start a broker until the leader's instance ends cleanly.
  until flux start -o --config "$config/etc/flux/config" $options; do
    echo "The broker exited with $?; trying again in 15s"
    sleep 15
  done
  status=0
fi
touch "$root/flux-operator-complete.txt"
exit $status
