# Runs in the flux-installer init container of each node Pod, after the
# variables above: copies the Flux install of the view image into the
# shared volume, and writes the host list and the broker configuration
# there for the node container.
set -eu
root=/mnt/flux
config=$root/config
mkdir -p "$config/etc/flux/system/cron.d" "$config/etc/flux/config" "$config/etc/curve" "$config/run/flux" "$config/var/lib/flux" "$root/view"
printf '%s\n' "$FLUX_HOSTS" > "$config/etc/flux/system/hostlist"
printf '%s' "$FLUX_BROKER_CONFIG" > "$config/etc/flux/config/broker.toml"
echo "Flux broker configuration for $(hostname):"
cat "$config/etc/flux/config/broker.toml"

# The view image links /opt/view to its one view under /opt/views/._view;
# it and /opt/software, which it links into, are what the node needs.
view=/opt/views/._view/$(ls /opt/views/._view/)
cp -R "$view"/* "$root/view"
cp -R /opt/software "$root/"
touch "$root/flux-operator-done.txt"
